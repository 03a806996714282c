// How a trained model's bf16 parameters are stepped (the `precision` config field and Optimizer option). "bf16-mixed":
// the model stays bf16 for forward, backward and generation, while AdamW steps a float32 master copy of every bf16
// parameter with float32 moments and copies it back rounded; "pure-bf16": AdamW steps the bf16 parameters in place
// with bf16 moments, as CoMLRL (PyTorch's AdamW on a bf16 model) does. Why both: AdamW's update is about the learning
// rate, and at the default 5e-6 that is under half a bf16 ulp of any weight above ~1.3e-3, so pure bf16 leaves almost
// every weight unchanged; the master accumulates those updates. "auto" is bf16-mixed for a bf16 model on a GPU, where
// bf16 is chosen to fit, and pure-bf16 on a CPU (CoMLRL's behaviour, and half the optimizer memory). float32
// parameters step in float32 whatever is asked.

/** The precision asked for: "auto", "bf16-mixed" or "pure-bf16". */
export type Precision = "auto" | "bf16-mixed" | "pure-bf16";
/** The precision an optimizer steps in: float32 parameters are always "fp32". */
export type ResolvedPrecision = "fp32" | "bf16-mixed" | "pure-bf16";

/** Every value the `precision` field takes. */
export const PRECISIONS: readonly Precision[] = ["auto", "bf16-mixed", "pure-bf16"];

/** What `requested` means for parameters of `dtype` on `device` ("cpu", "cuda:N"). */
export function resolvePrecision(requested: Precision, dtype: string, device: string): ResolvedPrecision {
  if (dtype !== "bfloat16") return "fp32";
  if (requested !== "auto") return requested;
  return device.startsWith("cuda") ? "bf16-mixed" : "pure-bf16";
}

/** Bytes per trained parameter, by what holds them. */
export interface TrainingBytes {
  /** The weight itself. */
  weight: number;
  /** Its gradient, in the weight's dtype. */
  gradient: number;
  /** AdamW's two moments. */
  moments: number;
  /** The float32 master weight (bf16-mixed only). */
  master: number;
}

/** Bytes per trained parameter under a precision: fp32 4 + 4 + 8; bf16-mixed 2 + 2 + 8 + 4; pure-bf16 2 + 2 + 4. */
export function trainingBytes(precision: ResolvedPrecision): TrainingBytes {
  switch (precision) {
    case "fp32":
      return { weight: 4, gradient: 4, moments: 8, master: 0 };
    case "bf16-mixed":
      return { weight: 2, gradient: 2, moments: 8, master: 4 };
    case "pure-bf16":
      return { weight: 2, gradient: 2, moments: 4, master: 0 };
  }
}
