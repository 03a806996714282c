// What the preference stages read of their trainer's config: MADPO's or MARLHF's, less the pair selection, in which
// the iterative trainers differ (they pair current against comparator candidates).
import type { MADPOConfig, MARLHFConfig } from "../../config/index.js";

/** MADPO's config as every preference trainer has it. */
export type PreferenceBaseConfig = Omit<MADPOConfig, "pairSelection">;

/** MARLHF's config as MARLHF and MARLHFIter have it: what the reward model and the RL phase read. */
export type RlhfConfig = Omit<MARLHFConfig, "pairSelection">;
