// The variants the exact-resume, leak and lane suites run beside every registered trainer: another shape of a
// trainer that takes another path through the house (value heads on IAC's actors, MAPPO's per-agent critics under a
// clipped objective, MARLHF's actor-critic RL phases with critics from the agents' model).

/** A variant: its label in the suites, the registered trainer's section, and its config over the suite's. */
export interface TrainerVariant {
  label: string;
  section: string;
  config: Record<string, unknown>;
}

export const TRAINER_VARIANTS: readonly TrainerVariant[] = [
  { label: "IAC (shared heads)", section: "iac", config: { useSeparateCritic: false, valueHeadHiddenDim: 4 } },
  { label: "MAPPO (per-agent critics)", section: "mappo", config: { centralizedCritic: false, lossType: "dapo" } },
  { label: "MARLHF (IAC)", section: "marlhf", config: { rlAlgorithm: "iac", criticType: "q" } },
  { label: "MARLHF (MAAC)", section: "marlhf", config: { rlAlgorithm: "maac" } },
];
