// dlc_kernel.cuh (device): placeholder, written by the emulation/device-header work (issue 5).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
