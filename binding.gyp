{
  "targets": [
    {
      "target_name": "comlrl",
      "sources": ["<!@(node scripts/find-libtorch.mjs --sources)"],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "<!@(node scripts/find-libtorch.mjs --field includeDirs)"
      ],
      "ldflags": ["-Wl,-rpath,'$$ORIGIN/libs'"],
      "libraries": ["<!@(node scripts/find-libtorch.mjs --field linkFlags)"],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_CPP_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED",
        "COMLRL_WITH_CUDA=<!(node scripts/find-libtorch.mjs --field cudaFlag)",
        "COMLRL_WITH_NCCL=<!(node scripts/find-libtorch.mjs --field ncclFlag)"
      ],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++14", "-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": ["-std=c++<!(node scripts/find-libtorch.mjs --field cxxStandard)", "-fexceptions", "-frtti", "-O3", "-Wno-unused-parameter",
                    "<!@(node scripts/find-libtorch.mjs --field cxxFlags)"]
    }
  ]
}
