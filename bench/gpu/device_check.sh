#!/usr/bin/env bash
# One call on a lent GPU machine (no Rust there): the GPU tests and the benchmark, each under its
# own time limit, logs and Markdown tables under $OUT.
#
# Prepare here (x86-64 builds carried in the ignored folder .gpu/):
#   cargo build --release && cargo test --release --test cuda_run --no-run
#   mkdir -p .gpu && cp target/release/dlc-egg .gpu/ && cp "$(ls -t target/release/deps/cuda_run-* | grep -v '\.d$' | head -1)" .gpu/cuda_run
# then run `bash bench/gpu/device_check.sh` there with `.gpu` carried (at most 8 files come back:
# env.txt, cuda_run.log, extra.log (twice + ncu) and a .md/.log pair per bench step; with more than
# 8 files the logs are packed into logs.tgz). STEPS (default "bench sm80 tests extended") picks the
# parts; `fp32` runs bench/cpu/run.py's fp32 ONNX cases (BERT layer, ResNet blocks, GEMM, conv,
# LayerNorm, softmax, ...) and every exported model in .gpu/models/*.onnx (with its stored inputs
# beside it) on the GPU, checked against onnxruntime on the CPU; `models` exports ResNet-18,
# MobileNetV2, ViT-B/16, BERT-base and GPT-2 there (scripts/export-real-models.py, MODELS picks)
# and runs them the same way.
set -u
OUT=${OUT:-/tmp/dlc-gpu-out}
mkdir -p "$OUT"
REPO=$(pwd)
STEPS=${STEPS:-bench sm80 tests extended}  # also: twice ncu big
REPEAT=${REPEAT:-20}
export PYTHONUNBUFFERED=1

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  # NVRTC no newer than the driver: the system toolkit's, else the one beside torch.
  for lib in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so \
             $(python3 -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia/cu13/lib/libnvrtc.so.13; do
    if [ -e "$lib" ]; then export DLC_NVRTC_LIB=$lib; break; fi
  done
  [ -d /usr/local/cuda/include ] && export DLC_CUDA_INCLUDE=/usr/local/cuda/include
  echo "DLC_NVRTC_LIB=${DLC_NVRTC_LIB:-unset} DLC_CUDA_INCLUDE=${DLC_CUDA_INCLUDE:-unset}"
  nvcc --version | tail -2
  .gpu/dlc-egg --version
} 2>&1 | tee "$OUT/env.txt"
export DLC_NVRTC_LIB=$(grep -o 'DLC_NVRTC_LIB=[^ ]*' "$OUT/env.txt" | cut -d= -f2)
[ "$DLC_NVRTC_LIB" = unset ] && unset DLC_NVRTC_LIB
[ -d /usr/local/cuda/include ] && export DLC_CUDA_INCLUDE=/usr/local/cuda/include

bench() {  # name, extra args...
  local name=$1; shift
  timeout "${BENCH_LIMIT:-240}" python3 bench/gpu/run.py --dlc .gpu/dlc-egg --repeat "$REPEAT" \
    --timeout "${DLC_LIMIT:-45}" --results "$OUT/$name.md" "$@" > "$OUT/$name.log" 2>&1
  echo "== $name: exit $?"; grep -E '^\| ' "$OUT/$name.md" 2>/dev/null | head -20
}

for step in $STEPS; do
  start=$SECONDS
  case $step in
    bench) bench gpu-native ;;
    sm80) bench gpu-sm80 --arch sm80 ;;
    extended) bench gpu-extended --extended --cases \
      gemm_symbolic_4096,attention_full,attention_causal_hd32,attention_causal_hd80,attention_causal_hd96,conv3x3_n1,conv3x3_n256_224 ;;
    twice)
      # the same program compiled in two processes (the CUDA cache must not hide ptxas's report)
      for i in 1 2; do
        .gpu/dlc-egg run examples/gemm_bias_relu.json --device cuda --random 1 --out-dir /tmp/twice$i > /tmp/twice$i.log 2>&1
        rc=$?; cat /tmp/twice$i.log >> "$OUT/extra.log"
        echo "== twice $i: exit $rc"; tail -3 /tmp/twice$i.log
      done ;;
    ncu)
      # one launch of each kernel under Nsight Compute: speed of light, occupancy, stalls
      for g in ${NCU_GRAPHS:-gemm_4096 conv3x3}; do
        for a in ${NCU_ARCHS:-sm90 sm80}; do
          timeout "${NCU_LIMIT:-90}" ncu --section SpeedOfLight --section Occupancy --section LaunchStats \
            --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
            --section SchedulerStats --section InstructionStats ${NCU_EXTRA:-} .gpu/dlc-egg run "bench/gpu/graphs/$g.json" \
            --device cuda --arch "$a" --random 1 --out-dir "/tmp/ncu-$g-$a" >> "$OUT/extra.log" 2>&1
          echo "== ncu $g $a: exit $?"
        done
      done
      grep -E "^  [a-z_0-9]+|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occ|Block Limit|Stall|Executed Ipc A" "$OUT/extra.log" | head -80 ;;
    big) bench gpu-big --cases conv3x3_n256_224 ;;
    tests)
      # the test binary looks for examples/ and tests/golden under the path it was built in
      built=${BUILT_IN:-/work/main}  # CARGO_MANIFEST_DIR where the binary was built
      [ -n "$built" ] && [ ! -e "$built" ] && mkdir -p "$(dirname "$built")" && ln -s "$REPO" "$built"
      timeout "${TEST_LIMIT:-90}" .gpu/cuda_run --ignored --test-threads 1 > "$OUT/cuda_run.log" 2>&1
      echo "== tests: exit $?"; grep -E "^test |test result" "$OUT/cuda_run.log" ;;
    fp32)
      models=(); for m in .gpu/models/*.onnx; do [ -e "$m" ] && models+=(--model "$m"); done
      timeout "${FP32_LIMIT:-180}" python3 bench/cpu/run.py --device cuda --dlc .gpu/dlc-egg --threads 16 \
        --rounds 1 --repeat "${FP32_REPEAT:-10}" --case-timeout 90 ${FP32_ONLY:+--only "$FP32_ONLY"} "${models[@]}" \
        --results "$OUT/gpu-fp32.md" > "$OUT/gpu-fp32.log" 2>&1
      echo "== fp32: exit $?"; grep -E "^ *[a-z_0-9]+: dlc-egg" "$OUT/gpu-fp32.log" ;;
    models)
      # real models exported there (random seeded weights, no download: the image has torch,
      # torchvision and transformers), run on the GPU, checked against onnxruntime on the CPU
      timeout "${EXPORT_LIMIT:-180}" python3 scripts/export-real-models.py --out /tmp/exports \
        --only "${MODELS:-resnet18,mobilenet_v2,vit_b_16,bert,gpt2}" > "$OUT/export.log" 2>&1
      echo "== export: exit $?"; ls /tmp/exports
      models=(); for m in /tmp/exports/*.onnx; do [ -e "$m" ] && models+=(--model "$m"); done
      timeout "${MODELS_LIMIT:-240}" python3 bench/cpu/run.py --device cuda --dlc .gpu/dlc-egg --threads 16 \
        --rounds 1 --repeat 5 --case-timeout 200 --only none "${models[@]}" \
        --results "$OUT/gpu-models.md" > "$OUT/gpu-models.log" 2>&1
      echo "== models: exit $?"; grep -E "^ *[a-z_0-9]+: dlc-egg" "$OUT/gpu-models.log" ;;
  esac
  echo "== $step took $((SECONDS - start)) s"
done
# at most 8 files come back: pack the logs when there are more
if [ "$(ls "$OUT" | wc -l)" -gt 8 ]; then
  (cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
fi
