// MAGRPO's baselines differ only in the advantage mode's default (COMLRL-SPEC §2.1): raw returns (REINFORCE), the
// group max (ReMax) and leave-one-out means (RLOO). Under the default advantage normalization all four give the same
// z-scored advantages; they differ once `advantageNormalization: false`.
import { mareinforceConfig, maremaxConfig, marlooConfig, type MAGRPOConfig, type MAGRPOConfigInput } from "../../config/index.js";
import { MAGRPOTrainer } from "./magrpo.js";

/** MAGRPO without a baseline (advantageMode "raw"). */
export class MAREINFORCETrainer extends MAGRPOTrainer {
  override readonly algorithm = "MAREINFORCE";
  static override buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return mareinforceConfig(input);
  }
}

/** MAGRPO with the group maximum as baseline (advantageMode "max"). */
export class MAReMaxTrainer extends MAGRPOTrainer {
  override readonly algorithm = "MAReMax";
  static override buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return maremaxConfig(input);
  }
}

/** MAGRPO with leave-one-out baselines (advantageMode "rloo"). */
export class MARLOOTrainer extends MAGRPOTrainer {
  override readonly algorithm = "MARLOO";
  static override buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return marlooConfig(input);
  }
}
