// The shape of transformers-config-keys.ts, the table scripts/reference/make_config_keys.py generates from
// transformers' source (judge-config-keys.ts judges a config.json by it).

/** One family's part of the table: the keys its causal-LM code reads and every key its config class knows, each with
 * the value transformers uses when the file leaves it out (null: none). */
export interface FamilyConfigKeys {
  /** The keys the family's code reads. */
  reads: Record<string, unknown>;
  /** Every key the config class (and PreTrainedConfig) defines. */
  fields: Record<string, unknown>;
}

/** The generated table: the transformers version it was read from, and each family's keys. */
export interface TransformersConfigKeys {
  /** transformers' version whose source the table was generated from. */
  transformers: string;
  /** model_type → its keys. */
  families: Record<string, FamilyConfigKeys>;
}
