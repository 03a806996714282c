// The native module behind a model-layer object, for the native calls that take modules themselves (the collectives
// of data-parallel training, a run's fingerprint): code outside src/models reaches a module through this, never
// through a class's `native`.
import type { NativeModel, NativeValueHead } from "../native/binding.js";
import { CausalLM } from "./causal-lm.js";
import { ValueHead } from "./value-head.js";

/** A module with parameters that the native core holds: a causal LM or a value head. */
export type NativeModule = NativeModel | NativeValueHead;

/** A CausalLM's or a ValueHead's native module; null for any other object (a component without parameters). */
export function nativeModuleOf(key: object): NativeModule | null {
  return key instanceof CausalLM || key instanceof ValueHead ? key.native : null;
}
