// Chat templates are code from the model repository, run in this process by @huggingface/jinja, whose interpreter
// has no bounds: range(10^9) builds its list whole (a fatal V8 out-of-memory), nested loops run as long as they
// like, and a string doubled in a loop grows to V8's limit. Here a render is bounded in the interpreter's steps
// (every node it evaluates), in the size of any value it makes and in the length of a range, each far above what
// real templates take (the templates of tests/golden/tokenizers render a 100-turn conversation in 1,900–4,800 steps,
// ~27,000 characters: the step bound is some 5,000 turns); past one it stops with an error. The interpreter takes
// 3–30 µs a step, so the step bound is also one of seconds.
import { Environment, Interpreter, Template } from "@huggingface/jinja";

export const TEMPLATE_MAX_STEPS = 250_000;
export const TEMPLATE_MAX_RANGE = 100_000;
/** Characters of any one value (the output included). */
export const TEMPLATE_MAX_CHARS = 16 * 2 ** 20;

interface RuntimeValue {
  value: unknown;
}

// The interpreter's evaluate(), which every node goes through, is private in the package's typings.
const InterpreterBase = Interpreter as unknown as new (environment: Environment) => {
  run(program: Template["parsed"]): RuntimeValue;
  evaluate(node: unknown, environment: unknown): RuntimeValue;
};

/** One render's steps: each node evaluated is one, and each item a range() makes is one (a loop will run over it). */
class StepBudget {
  private spent = 0;

  spend(steps: number): void {
    this.spent += steps;
    if (this.spent > TEMPLATE_MAX_STEPS) throw new Error(`rendering took over ${TEMPLATE_MAX_STEPS} steps (a loop that does not end?)`);
  }
}

class BoundedInterpreter extends InterpreterBase {
  constructor(
    environment: Environment,
    private readonly budget: StepBudget,
  ) {
    super(environment);
  }

  override evaluate(statement: unknown, environment: unknown): RuntimeValue {
    this.budget.spend(1);
    const value = super.evaluate(statement, environment);
    const size = typeof value.value === "string" ? value.value.length : Array.isArray(value.value) ? value.value.length : 0;
    if (size > TEMPLATE_MAX_CHARS) throw new Error(`a value of ${size} characters is over the ${TEMPLATE_MAX_CHARS} a chat template may make`);
    return value;
  }
}

/** Python's range(), refusing one longer than TEMPLATE_MAX_RANGE before making it. */
function boundedRange(budget: StepBudget) {
  return (start: number, stop?: number, step = 1): number[] => {
    const [from, to] = stop === undefined ? [0, start] : [start, stop];
    if (step === 0) throw new Error("range() step must not be zero");
    const count = Math.max(0, Math.ceil((to - from) / step));
    if (!(count <= TEMPLATE_MAX_RANGE)) throw new Error(`range() of ${count} items is over the ${TEMPLATE_MAX_RANGE} a chat template may make`);
    budget.spend(count);
    return Array.from({ length: count }, (_, i) => from + i * step);
  };
}

// strftime_now as @huggingface/jinja defines it, reached through a template of its own (its globals are not exported).
const STRFTIME = new Template("{{ strftime_now(format) }}");

/** The globals Template.render sets, with range bounded. */
function globals(budget: StepBudget): Record<string, unknown> {
  return {
    false: false,
    true: true,
    none: null,
    False: false,
    True: true,
    None: null,
    raise_exception: (message: string) => {
      throw new Error(message);
    },
    range: boundedRange(budget),
    strftime_now: (format: string) => STRFTIME.render({ format }),
  };
}

/** A compiled chat template whose renders are bounded (see above); errors say which bound a render passed. */
export class BoundedChatTemplate {
  private readonly template: Template;

  constructor(source: string) {
    this.template = new Template(source);
  }

  render(variables: Record<string, unknown>): string {
    const budget = new StepBudget();
    const environment = new Environment();
    for (const [name, value] of Object.entries({ ...globals(budget), ...variables })) environment.set(name, value);
    return String(new BoundedInterpreter(environment, budget).run(this.template.parsed).value);
  }
}
