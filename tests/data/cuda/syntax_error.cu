extern "C" __global__ void broken(float* out) {
    out[threadIdx.x] = 1.0f +;
}
