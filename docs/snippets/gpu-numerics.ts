import { numerics } from "../../src/index.js";

numerics(); // { tf32Requested, tf32, deterministic, cublasWorkspaceConfig }
