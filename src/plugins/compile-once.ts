/**
 * What fastify compiles from a schema (a validator, a serializer), kept by the schema's JSON: a
 * process that builds the app more than once (a test file, once a test; `npm run dev`
 * after each edit) compiles each schema once. Compilation was three fifths of a build.
 */
export class CompiledOnce<T> {
  readonly #compiled = new Map<string, T>();

  /** `compile`'s result for `schema` in `context` (what else changes the result), compiled at most once. */
  get(context: string, schema: unknown, compile: () => T): T {
    let key: string;
    try {
      key = `${context} ${JSON.stringify(schema)}`;
    } catch {
      return compile(); // A recursive schema has no JSON: compiled every time.
    }
    let found = this.#compiled.get(key);
    if (found === undefined) {
      found = compile();
      this.#compiled.set(key, found);
    }
    return found;
  }
}
