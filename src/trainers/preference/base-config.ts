// What the preference stages read of their trainer's config: MADPO's or MARLHF's, less the pair selection, in which
// the iterative trainers differ (they pair current against comparator candidates).
import type { MADPOConfig } from "../../config/index.js";

export type { RlhfConfig } from "../rl-back-end.js";

/** MADPO's config as every preference trainer has it. */
export type PreferenceBaseConfig = Omit<MADPOConfig, "pairSelection">;
