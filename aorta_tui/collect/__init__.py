"""What a trial collects beside its result: upstream's collectors (rocprof, proton, ncu, torch_profiler, layer_numerics), compute-sanitizer, a probe recipe's paths, and which files a trial keeps."""
