// Started by memory-window.test.ts with the CPU allocator's cache off, so that freed tensors leave the process:
// a 512 MiB copy sets the process's peak, then a 256 MiB copy peaks below it, which only the sampling thread sees.
import { addon } from "../../src/native/loader.js";
import { memoryWindow } from "../../src/runtime.js";

const MIB = 2 ** 20;
memoryWindow();
await addon().measureCopy({ bytes: 256 * MIB, device: "cpu", iterations: 1 });
const large = memoryWindow();
await new Promise((resolve) => setTimeout(resolve, 20));
const between = memoryWindow();
await addon().measureCopy({ bytes: 128 * MIB, device: "cpu", iterations: 1 });
const small = memoryWindow();
console.log(JSON.stringify({ large, between, small }));
