// Lint for what review otherwise finds by hand: `any`, unused code, and the recommended TypeScript checks.
import tseslint from "typescript-eslint";

const NATIVE_HANDLES = "native handles are internal to src/models and src/native: use the model's own methods";

export default tseslint.config(
  { ignores: ["dist/**", "build/**", "node_modules/**", "**/*.d.ts"] },
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      // An underscore marks what is unused on purpose: a destructured field left out, a parameter a signature requires.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_", caughtErrors: "none" }],
      // A config's public type is an interface extending the type its field specs derive (ConfigOf), under its own
      // name, which TypeDoc and the docs generator read field by field.
      "@typescript-eslint/no-empty-object-type": ["error", { allowInterfaces: "with-single-extends" }],
    },
  },
  {
    // The native handles (the `native` of CausalLM, ValueHead and Optimizer) stay below the model classes: only
    // src/models and src/native reach them, so the rest of the library goes through the models' own API.
    files: ["src/**/*.ts"],
    ignores: ["src/models/**", "src/native/**"],
    rules: {
      "no-restricted-syntax": [
        "error",
        { selector: "MemberExpression[property.name='native']", message: NATIVE_HANDLES },
        { selector: "ObjectPattern > Property[key.name='native']", message: NATIVE_HANDLES },
      ],
    },
  },
  {
    // These read JSON written by the Python reference scripts (goldens, a safetensors header, a torch run's output):
    // its shape is what the tests assert, field by field, so it is typed no further than JSON.parse types it.
    files: ["tests/golden/**", "tests/native/io-failures.test.ts", "tests/support/python.ts", "tests/unit/model-config.test.ts", "tests/unit/hub-configs.test.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
