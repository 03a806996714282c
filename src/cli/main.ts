#!/usr/bin/env node
// The `comlrl` command.
import { runtimeInfo } from "../runtime.js";

const [command = "info"] = process.argv.slice(2);
switch (command) {
  case "info":
  case "demo":
    console.log(JSON.stringify(runtimeInfo(), null, 2));
    break;
  default:
    console.error(`comlrl: unknown command "${command}" (expected: info, demo)`);
    process.exit(2);
}
