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

/** `/tmp/perf-<pid>.map`: one `<start hex> <size hex> <name>` line per piece of generated code. */
export function parsePerfMap(text: string): CodeRange[] {
  const ranges: CodeRange[] = [];
  for (const line of text.split('\n')) {
    const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/i.exec(line);
    if (match?.[1] === undefined || match[2] === undefined || match[3] === undefined) continue;
    ranges.push({ start: parseInt(match[1], 16), size: parseInt(match[2], 16), name: match[3] });
  }
  return ranges.sort((a, b) => a.start - b.start);
}

/** The range holding `address`, if any (ranges sorted by start, as parsePerfMap returns them). */
export function rangeAt(ranges: readonly CodeRange[], address: number): CodeRange | undefined {
  let [low, high] = [0, ranges.length - 1];
  let candidate: CodeRange | undefined;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const range = ranges[middle];
    if (range === undefined) break;
    if (range.start <= address) {
      candidate = range;
      low = middle + 1;
    } else {
      high = middle - 1;
    }
  }
  return candidate !== undefined && address < candidate.start + candidate.size ? candidate : undefined;
}

/** The process id a callgrind output file was written for. */
export function callgrindPid(text: string): number | undefined {
  const match = /^pid: (\d+)$/m.exec(text);
  return match?.[1] === undefined ? undefined : Number(match[1]);
}

/**
 * Instructions (`Ir`) by function, each counted once, in the function that executed them. The
 * format (valgrind's "Callgrind Format Specification"): `fn=` names the function the following cost
 * lines belong to, `(id) name` the first time and `(id)` after; `calls=` announces that the next
 * cost line is a call's inclusive cost, which belongs to the callee and is skipped here.
 */
export function selfInstructions(text: string, jit: readonly CodeRange[] = []): Map<string, number> {
  const events = /^events: (.*)$/m.exec(text)?.[1]?.trim().split(/\s+/) ?? ['Ir'];
  const column = 1 + events.indexOf('Ir');
  if (column === 0) throw new Error(`callgrind counted no Ir (events: ${events.join(' ')})`);
  // One position column (`line`) is assumed: `--dump-instr=yes` writes two (`instr line`).
  const positions = /^positions: (.*)$/m.exec(text)?.[1]?.trim().split(/\s+/) ?? ['line'];
  if (positions.length !== 1) throw new Error(`callgrind positions ${positions.join(' ')}: only one is read`);
  const names = new Map<string, string>();
  const resolve = (spec: string): string => {
    const compressed = /^\((\d+)\)(?: (.*))?$/.exec(spec);
    let name = spec;
    if (compressed?.[1] !== undefined) {
      if (compressed[2] !== undefined) names.set(compressed[1], compressed[2]);
      name = names.get(compressed[1]) ?? spec;
    }
    return /^0x[0-9a-f]+$/i.test(name) ? (rangeAt(jit, parseInt(name, 16))?.name ?? name) : name;
  };
  const byFunction = new Map<string, number>();
  let current = '(unknown)';
  let callCostNext = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('fn=')) current = resolve(line.slice(3));
    else if (line.startsWith('cfn=')) resolve(line.slice(4));
    else if (line.startsWith('calls=')) callCostNext = true;
    // A cost line: a position (a number, +n or -n relative to the last, or * for the same), then the counts.
    else if (/^(?:[+-]?[0-9]|\*)/.test(line)) {
      if (callCostNext) callCostNext = false;
      else byFunction.set(current, (byFunction.get(current) ?? 0) + Number(line.trim().split(/\s+/)[column] ?? 0));
    }
  }
  return byFunction;
}
