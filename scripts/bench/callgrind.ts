/**
 * Reads valgrind's callgrind output: instructions executed in each function itself (not in the
 * functions it calls). JavaScript compiled by V8 has no symbols; callgrind names it by address, and
 * `node --perf-basic-prof` writes the names of those addresses to /tmp/perf-<pid>.map.
 */

export interface CodeRange {
  start: number;
  size: number;
  name: string;
}

/** `/tmp/perf-<pid>.map`: one `<start hex> <size hex> <name>` line per piece of generated code, in the order V8 made them. */
export function parsePerfMap(text: string): CodeRange[] {
  const ranges: CodeRange[] = [];
  for (const line of text.split('\n')) {
    const [, start, size, name] = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/i.exec(line) ?? [];
    if (start !== undefined && size !== undefined && name !== undefined)
      ranges.push({ start: parseInt(start, 16), size: parseInt(size, 16), name });
  }
  return ranges;
}

/** The range holding `address`: the last one written, since V8 reuses the memory of code it has thrown away. */
export function rangeAt(ranges: readonly CodeRange[], address: number): CodeRange | undefined {
  return ranges.findLast((range) => range.start <= address && address < range.start + range.size);
}

/**
 * Instructions (`Ir`) by function, each counted once, in the function that executed them. The
 * format (valgrind's "Callgrind Format Specification"): `fn=` names the function the following cost
 * lines belong to, `(id) name` the first time and `(id)` after; `calls=` announces that the next
 * cost line is a call's inclusive cost, which belongs to the callee and is skipped here. Only the
 * output instructions.ts asks for is read: one position (`line`) and one event (`Ir`) per cost line.
 */
export function selfInstructions(text: string, jit: readonly CodeRange[] = []): Map<string, number> {
  if (!/^positions: line$/m.test(text) || !/^events: Ir$/m.test(text))
    throw new Error('callgrind output must have `positions: line` and `events: Ir`, one column each');
  const names = new Map<string, string>();
  const jitName = (name: string) =>
    /^0x[0-9a-f]+$/i.test(name) ? (rangeAt(jit, parseInt(name, 16))?.name ?? name) : name;
  const nameOf = (spec: string): string => {
    const [, id, name] = /^\((\d+)\)(?: (.*))?$/.exec(spec) ?? [];
    if (id === undefined) return jitName(spec);
    if (name !== undefined) names.set(id, jitName(name));
    return names.get(id) ?? spec;
  };
  const byFunction = new Map<string, number>();
  let current = '(unknown)';
  let callCostNext = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('fn=')) current = nameOf(line.slice(3));
    else if (line.startsWith('cfn=')) nameOf(line.slice(4));
    else if (line.startsWith('calls=')) callCostNext = true;
    // A cost line: a position (a number, +n or -n relative to the last, or * for the same), then the count.
    else if (/^(?:[+-]?[0-9]|\*)/.test(line)) {
      if (callCostNext) callCostNext = false;
      else byFunction.set(current, (byFunction.get(current) ?? 0) + Number(line.split(' ')[1] ?? 0));
    }
  }
  return byFunction;
}
