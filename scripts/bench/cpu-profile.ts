import { readFileSync } from 'node:fs';
import { projectRoot } from '../../src/paths.js';

/** The parts of V8's .cpuprofile (as written by node --cpu-prof) this reads. */
interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  /** Microseconds since the previous sample. */
  timeDeltas: number[];
}

export interface SelfTime {
  name: string;
  ms: number;
  /** Share of the time the process was not idle. */
  share: number;
}

export interface ProfileSummary {
  totalMs: number;
  idleMs: number;
  functions: SelfTime[];
  /** Self time by where the code lives: a package, the project's src, node internals, GC. */
  origins: SelfTime[];
}

function shortUrl(url: string): string {
  const path = url.replace(/^file:\/\//, '');
  const modules = path.lastIndexOf('/node_modules/');
  if (modules >= 0) return path.slice(modules + 1);
  return path.startsWith(projectRoot) ? path.slice(projectRoot.length + 1) : path;
}

function originOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const path = shortUrl(url);
  const [, scope, name] = /^node_modules\/(@[^/]+\/)?([^/]+)/.exec(path) ?? [];
  if (name !== undefined) return `${scope ?? ''}${name}`;
  return path.startsWith('dist/') ? path.split('/').slice(0, 3).join('/') : path;
}

function ranked(totals: Map<string, number>, busyMs: number, top: number): SelfTime[] {
  return [...totals]
    .map(([name, ms]) => ({ name, ms, share: ms / busyMs }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, top);
}

/** Self time per function and per origin, from a .cpuprofile file. */
export function summariseProfile(file: string, top = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const functions = new Map<string, number>();
  const origins = new Map<string, number>();
  let totalMs = 0;
  let idleMs = 0;
  profile.samples.forEach((id, index) => {
    const ms = (profile.timeDeltas[index] ?? 0) / 1000;
    const frame = frames.get(id);
    if (frame === undefined) return;
    totalMs += ms;
    if (frame.functionName === '(idle)') {
      idleMs += ms;
      return;
    }
    const name =
      `${frame.functionName || '(anonymous)'} ${frame.url === '' ? '' : `${shortUrl(frame.url)}:${frame.lineNumber + 1}`}`.trim();
    functions.set(name, (functions.get(name) ?? 0) + ms);
    const origin = originOf(frame.url, frame.functionName);
    origins.set(origin, (origins.get(origin) ?? 0) + ms);
  });
  const busyMs = totalMs - idleMs;
  return { totalMs, idleMs, functions: ranked(functions, busyMs, top), origins: ranked(origins, busyMs, top) };
}

export function formatProfile(title: string, summary: ProfileSummary): string {
  const lines = (rows: SelfTime[]) =>
    rows.map(
      (row) => `  ${(row.share * 100).toFixed(1).padStart(5)}%  ${row.ms.toFixed(0).padStart(7)} ms  ${row.name}`,
    );
  return [
    `${title}: ${(summary.totalMs / 1000).toFixed(1)} s profiled, ${((summary.idleMs / summary.totalMs) * 100).toFixed(1)}% idle; shares are of busy time`,
    ' self time by origin:',
    ...lines(summary.origins),
    ' self time by function:',
    ...lines(summary.functions),
  ].join('\n');
}
