// The public API of comlrl.
export { runtimeInfo, setNumThreads, type RuntimeInfo } from "./runtime.js";
export { AddonLoadError } from "./native/loader.js";
