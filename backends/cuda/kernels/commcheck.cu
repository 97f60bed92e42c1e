// The kernels of commcheck-cuda, compiled ahead of time to PTX by NVRTC 13.0
// (compute_75) and embedded in the crate (kernels/commcheck.ptx). A test
// regenerates the PTX and checks it equals the embedded copy.
//
// Cancellation: every kernel that can run long walks its elements in
// block-uniform tiles and, at the start of each tile, thread 0 reads the
// *cancel word* (pinned host memory mapped into the device, written by the
// host); the whole block stops once it is non-zero. That is how NativeCancel
// tears work down.
//
// Failures go to the *error word* (also mapped host memory, read by the host
// once the work's event completed): a plain store of the first code, never
// an atomic (atomics on host memory need host-native atomics). A kernel
// never traps unless asked to.

#define COMMCHECK_MAX_RANKS 64
#define COMMCHECK_THREADS 256

// Error codes written to the error word.
#define COMMCHECK_OK 0
#define COMMCHECK_CANCELLED 1
#define COMMCHECK_HEADER_MISMATCH 2
#define COMMCHECK_INJECTED_FAULT 3

__device__ __forceinline__ void commcheck_fail(volatile int* error, int code) {
    if (error != 0 && *error == COMMCHECK_OK) {
        *error = code;
    }
}

// Block-uniform: whether the block must stop (the cancel word is set).
__device__ __forceinline__ bool commcheck_stop(const volatile unsigned int* cancel,
                                               volatile int* error) {
    __shared__ int stop;
    __syncthreads();
    if (threadIdx.x == 0) {
        stop = (cancel != 0 && *cancel != 0u) ? 1 : 0;
        if (stop) {
            commcheck_fail(error, COMMCHECK_CANCELLED);
        }
    }
    __syncthreads();
    return stop != 0;
}

// Element types (`Element::code` in src/element.rs).
#define COMMCHECK_F32 0
#define COMMCHECK_F16 1
#define COMMCHECK_BF16 2

// binary16 bits to binary32 and back (round to nearest even): PTX `cvt`.
__device__ __forceinline__ float commcheck_from_f16(unsigned short bits) {
    float value;
    asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
    return value;
}

__device__ __forceinline__ unsigned short commcheck_to_f16(float value) {
    unsigned short bits;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
    return bits;
}

// bfloat16 is the upper half of a binary32; narrowing rounds to nearest even
// by hand (`cvt.rn.bf16.f32` needs sm_80), NaN stays a quiet NaN.
__device__ __forceinline__ float commcheck_from_bf16(unsigned short bits) {
    return __uint_as_float(((unsigned int)bits) << 16);
}

__device__ __forceinline__ unsigned short commcheck_to_bf16(float value) {
    unsigned int bits = __float_as_uint(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return (unsigned short)((bits >> 16) | 0x0040u);
    }
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (unsigned short)(bits >> 16);
}

// One 16-bit element widened (`element` is F16 or BF16).
__device__ __forceinline__ float commcheck_widen(unsigned int element, unsigned short bits) {
    return element == COMMCHECK_F16 ? commcheck_from_f16(bits) : commcheck_from_bf16(bits);
}

__device__ __forceinline__ unsigned short commcheck_narrow(unsigned int element, float value) {
    return element == COMMCHECK_F16 ? commcheck_to_f16(value) : commcheck_to_bf16(value);
}

// The input and output addresses of every rank of one all-reduce.
struct commcheck_ranks {
    const void* inputs[COMMCHECK_MAX_RANKS];
    void* outputs[COMMCHECK_MAX_RANKS];
};

// One rank's share of an all-reduce over `count` stream-ranks of one device:
// elements [begin, end) of every input are summed in member order and the
// sum is written to that range of every output (a fused reduce-scatter and
// all-gather: each element is read once per rank and written once per rank).
// `f32` elements: where `begin` is a multiple of four (the backend aligns
// shares to 256 elements) and every buffer is 16-byte aligned, four floats
// move per thread; otherwise one. 16-bit elements (`element` F16 or BF16)
// are widened, summed in `f32` in member order, and rounded once to the
// element type. `ranks` may live in mapped host memory: each block reads
// the addresses it needs once per tile.
extern "C" __global__ void commcheck_all_reduce_sum(
    const commcheck_ranks* ranks, unsigned int count, unsigned long long begin,
    unsigned long long end, unsigned int element, const volatile unsigned int* cancel,
    volatile int* error) {
    __shared__ const void* inputs[COMMCHECK_MAX_RANKS];
    __shared__ void* outputs[COMMCHECK_MAX_RANKS];
    __shared__ int misaligned;
    if (threadIdx.x == 0) {
        misaligned = 0;
    }
    __syncthreads();
    for (unsigned int r = threadIdx.x; r < count; r += blockDim.x) {
        inputs[r] = ranks->inputs[r];
        outputs[r] = ranks->outputs[r];
        if ((reinterpret_cast<unsigned long long>(inputs[r]) |
             reinterpret_cast<unsigned long long>(outputs[r])) % 16 != 0) {
            misaligned = 1;
        }
    }
    __syncthreads();
    unsigned long long tile = (unsigned long long)blockDim.x;
    unsigned long long stride = tile * gridDim.x;
    if (element != COMMCHECK_F32) {
        for (unsigned long long base = begin + (unsigned long long)blockIdx.x * tile; base < end;
             base += stride) {
            if (commcheck_stop(cancel, error)) {
                return;
            }
            unsigned long long i = base + threadIdx.x;
            if (i < end) {
                float sum = 0.0f;
                for (unsigned int r = 0; r < count; ++r) {
                    sum += commcheck_widen(element,
                                           reinterpret_cast<const unsigned short*>(inputs[r])[i]);
                }
                unsigned short bits = commcheck_narrow(element, sum);
                for (unsigned int r = 0; r < count; ++r) {
                    reinterpret_cast<unsigned short*>(outputs[r])[i] = bits;
                }
            }
        }
        return;
    }
    unsigned long long vectors = (begin % 4 == 0 && !misaligned) ? (end - begin) / 4 : 0;
    unsigned long long first = begin / 4;
    for (unsigned long long base = (unsigned long long)blockIdx.x * tile; base < vectors;
         base += stride) {
        if (commcheck_stop(cancel, error)) {
            return;
        }
        unsigned long long v = first + base + threadIdx.x;
        if (base + threadIdx.x < vectors) {
            float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (unsigned int r = 0; r < count; ++r) {
                float4 x = reinterpret_cast<const float4*>(inputs[r])[v];
                sum.x += x.x;
                sum.y += x.y;
                sum.z += x.z;
                sum.w += x.w;
            }
            for (unsigned int r = 0; r < count; ++r) {
                reinterpret_cast<float4*>(outputs[r])[v] = sum;
            }
        }
    }
    unsigned long long rest = begin + vectors * 4;
    for (unsigned long long base = rest + (unsigned long long)blockIdx.x * tile; base < end;
         base += stride) {
        if (commcheck_stop(cancel, error)) {
            return;
        }
        unsigned long long i = base + threadIdx.x;
        if (i < end) {
            float sum = 0.0f;
            for (unsigned int r = 0; r < count; ++r) {
                sum += reinterpret_cast<const float*>(inputs[r])[i];
            }
            for (unsigned int r = 0; r < count; ++r) {
                reinterpret_cast<float*>(outputs[r])[i] = sum;
            }
        }
    }
}

// Copies `rows` rows of `row_len` units (`T`: 16-bit halves or 32-bit
// words) from `source` (rows `source_stride` units apart) to `destination`
// (rows `destination_stride` apart), in block-uniform tiles. Returns
// whether the block stopped on the cancel word.
template <typename T>
__device__ __forceinline__ bool commcheck_copy_rows(
    const T* source, T* destination, unsigned long long rows, unsigned long long row_len,
    unsigned long long source_stride, unsigned long long destination_stride,
    const volatile unsigned int* cancel, volatile int* error) {
    unsigned long long total = rows * row_len;
    unsigned long long tile = (unsigned long long)blockDim.x;
    unsigned long long stride = tile * gridDim.x;
    for (unsigned long long base = (unsigned long long)blockIdx.x * tile; base < total;
         base += stride) {
        if (commcheck_stop(cancel, error)) {
            return true;
        }
        unsigned long long i = base + threadIdx.x;
        if (i < total) {
            unsigned long long row = i / row_len;
            unsigned long long column = i % row_len;
            destination[row * destination_stride + column] = source[row * source_stride + column];
        }
    }
    return false;
}

// `commcheck_copy_rows` in halves (16-bit units), as 32-bit words where
// both addresses are 4-byte aligned and every length and stride is even
// (every `f32` copy, and most 16-bit ones).
__device__ __forceinline__ bool commcheck_copy_halves(
    const void* source, void* destination, unsigned long long rows, unsigned long long row_len,
    unsigned long long source_stride, unsigned long long destination_stride,
    const volatile unsigned int* cancel, volatile int* error) {
    unsigned long long odd = (reinterpret_cast<unsigned long long>(source) |
                              reinterpret_cast<unsigned long long>(destination)) %
                                 4 |
                             (row_len | source_stride | destination_stride) % 2;
    if (odd == 0) {
        return commcheck_copy_rows(reinterpret_cast<const unsigned int*>(source),
                                   reinterpret_cast<unsigned int*>(destination), rows,
                                   row_len / 2, source_stride / 2, destination_stride / 2,
                                   cancel, error);
    }
    return commcheck_copy_rows(reinterpret_cast<const unsigned short*>(source),
                               reinterpret_cast<unsigned short*>(destination), rows, row_len,
                               source_stride, destination_stride, cancel, error);
}

// One strided copy: `rows` rows of `row_len` halves (16-bit units: an
// `f32` element is two), from `source` (rows `source_stride` halves apart)
// to `destination` (rows `destination_stride` apart). Concatenation and
// partition along an axis of row-major tensors, of any element type.
struct commcheck_segment {
    const void* source;
    void* destination;
    unsigned long long rows;
    unsigned long long row_len;
    unsigned long long source_stride;
    unsigned long long destination_stride;
};

// Copies the segments of `table` one after another (gathers, all-to-all,
// broadcast): the table's first 8 bytes are the segment count, the
// segments follow. It may live in mapped host memory (filled by the host
// once every member of a collective arrived).
extern "C" __global__ void commcheck_copy_segments(
    const unsigned long long* table, const volatile unsigned int* cancel, volatile int* error) {
    const commcheck_segment* segments = reinterpret_cast<const commcheck_segment*>(table + 1);
    unsigned long long count = table[0];
    for (unsigned long long s = 0; s < count; ++s) {
        if (commcheck_copy_halves(segments[s].source, segments[s].destination, segments[s].rows,
                                  segments[s].row_len, segments[s].source_stride,
                                  segments[s].destination_stride, cancel, error)) {
            return;
        }
    }
}

// The receiver's side of one point-to-point value (P2P-2): the sender's
// message (its address is the first word of `plan`, written by the host
// once both ends arrived) holds, at `offset`, `header_len` header bytes,
// then (at the next four-byte boundary) the payload. The header bytes are compared with the expected ones
// (mapped host memory), and only then is the payload copied to the
// receiver's tensor; a mismatch fails the work.
extern "C" __global__ void commcheck_receive(
    const unsigned long long* plan, unsigned long long offset, unsigned long long header_len,
    const unsigned char* expected, void* payload, unsigned long long len,
    const volatile unsigned int* cancel, volatile int* error) {
    __shared__ int mismatch;
    if (commcheck_stop(cancel, error)) {
        return;
    }
    const unsigned char* message = reinterpret_cast<const unsigned char*>(plan[0]) + offset;
    if (threadIdx.x == 0) {
        mismatch = 0;
    }
    __syncthreads();
    for (unsigned long long i = threadIdx.x; i < header_len; i += blockDim.x) {
        if (message[i] != expected[i]) {
            mismatch = 1;
        }
    }
    __syncthreads();
    if (mismatch) {
        if (threadIdx.x == 0) {
            commcheck_fail(error, COMMCHECK_HEADER_MISMATCH);
        }
        return;
    }
    // The payload (`len` halves) starts at the next four-byte boundary after
    // the header.
    const void* source = message + ((header_len + 3) & ~3ull);
    commcheck_copy_halves(source, payload, 1, len, len, len, cancel, error);
}

// The sender's side: the header bytes (mapped host memory) and the payload
// (`len` halves, at the next four-byte boundary) go into one device buffer,
// the route's native message.
extern "C" __global__ void commcheck_frame(
    const unsigned char* header, unsigned long long header_len, const void* payload,
    unsigned long long len, unsigned char* message, const volatile unsigned int* cancel,
    volatile int* error) {
    if (commcheck_stop(cancel, error)) {
        return;
    }
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < header_len; i += (unsigned long long)blockDim.x * gridDim.x) {
        message[i] = header[i];
    }
    void* destination = message + ((header_len + 3) & ~3ull);
    commcheck_copy_halves(payload, destination, 1, len, len, len, cancel, error);
}

// Elementwise `out = a (op) b`: op 0 adds, 1 subtracts, 2 multiplies, 3
// scales `a` by `factor` (b unused).
extern "C" __global__ void commcheck_elementwise(
    const float* a, const float* b, float* out, unsigned long long len, unsigned int op,
    float factor, const volatile unsigned int* cancel, volatile int* error) {
    unsigned long long tile = (unsigned long long)blockDim.x;
    unsigned long long stride = tile * gridDim.x;
    for (unsigned long long base = (unsigned long long)blockIdx.x * tile; base < len;
         base += stride) {
        if (commcheck_stop(cancel, error)) {
            return;
        }
        unsigned long long i = base + threadIdx.x;
        if (i < len) {
            float x = a[i];
            float y = op == 3 ? factor : b[i];
            out[i] = op == 0 ? x + y : op == 1 ? x - y : x * y;
        }
    }
}

// `out[m×n] = a[m×k] · b[k×n]`, row-major, one output element per thread
// (lazy-work calibration: long-running, cancellable work).
extern "C" __global__ void commcheck_matmul(
    const float* a, const float* b, float* out, unsigned long long m, unsigned long long k,
    unsigned long long n, const volatile unsigned int* cancel, volatile int* error) {
    unsigned long long total = m * n;
    unsigned long long tile = (unsigned long long)blockDim.x;
    unsigned long long stride = tile * gridDim.x;
    for (unsigned long long base = (unsigned long long)blockIdx.x * tile; base < total;
         base += stride) {
        if (commcheck_stop(cancel, error)) {
            return;
        }
        unsigned long long i = base + threadIdx.x;
        if (i < total) {
            unsigned long long row = i / n;
            unsigned long long column = i % n;
            float sum = 0.0f;
            for (unsigned long long j = 0; j < k; ++j) {
                sum += a[row * k + j] * b[j * n + column];
            }
            out[i] = sum;
        }
    }
}

// Spins until the cancel word is set or `cycles` clock cycles passed: work
// that runs long enough to be caught running.
extern "C" __global__ void commcheck_spin(
    unsigned long long cycles, const volatile unsigned int* cancel, volatile int* error) {
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < cycles) {
        if (cancel != 0 && *cancel != 0u) {
            commcheck_fail(error, COMMCHECK_CANCELLED);
            return;
        }
    }
}

// The fault instrument: the work item fails with `code` (not sticky in the
// context: the backend keeps it sticky in the completion).
extern "C" __global__ void commcheck_fault(volatile int* error, int code) {
    commcheck_fail(error, code);
}

// Poisons the context (a sticky CUDA error): only in process-isolated cases.
extern "C" __global__ void commcheck_trap() {
    __trap();
}
