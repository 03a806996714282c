// What a JavaScript caller, a config file or a user's function can hand the library although its types forbid it.
// The tests of the library's own run-time checks build such values with illTyped, so each is named for what it is.

/** `value` passed where a T is expected, which it is not: the check under test must refuse it by name. */
export function illTyped<T>(value: unknown): T {
  // The one cast: a value outside T is what these tests are about.
  return value as T;
}
