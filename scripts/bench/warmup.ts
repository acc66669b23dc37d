/**
 * `node dist/scripts/bench/warmup.js [scenario]`: how each server's cost per request settles after
 * it starts. Each life is one fresh start, then back-to-back slices of one scenario (default
 * get-one) with no warm-up; CPU time per response is printed per slice, as the median over lives
 * and the median of the within-pair ratios project/baseline (BENCHMARKS.md, "Warm-up"). Settings: WARMUP_LIVES (pairs, 4), WARMUP_SLICES (8), WARMUP_SLICE (s, 3),
 * BENCH_CONNECTIONS.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeConnections } from './http.js';
import { loadWithCpu, prepareTable, withServer } from './measure.js';
import { median } from './report.js';
import { loadRequest, selectScenarios } from './scenarios.js';
import { SERVER_KINDS, type ServerKind } from './server-process.js';
import { benchSettings, SMALL_TABLE, wholeSetting } from './settings.js';

interface Slice {
  rps: number;
  cpuUsPerRequest: number;
}

const cpuOf = (slice: Slice) => slice.cpuUsPerRequest;
const rpsOf = (slice: Slice) => slice.rps;
const lives = wholeSetting('WARMUP_LIVES', 4, 1);
const slices = wholeSetting('WARMUP_SLICES', 8, 1);
const sliceSeconds = wholeSetting('WARMUP_SLICE', 3, 1);
const { connections } = benchSettings();
const [scenario] = selectScenarios([process.argv[2] ?? 'get-one']);
if (scenario === undefined) throw new Error('no scenario');
const dir = mkdtempSync(join(tmpdir(), 'petstore-warmup-'));

const log = (message: string) => process.stderr.write(`[warmup] ${message}\n`);

try {
  const prepared = await prepareTable(dir, SMALL_TABLE);
  const curves: Record<ServerKind, Slice[][]> = { project: [], baseline: [] };
  for (let life = 0; life < lives; life += 1) {
    // Alternate which server goes first, as the benchmark does.
    const order = life % 2 === 0 ? SERVER_KINDS : [...SERVER_KINDS].reverse();
    for (const kind of order) {
      const curve = await withServer(kind, prepared, dir, async (server) => {
        const measured: Slice[] = [];
        for (let slice = 0; slice < slices; slice += 1) {
          const { measurement, cpuUsPerRequest } = await loadWithCpu(server, {
            requests: [loadRequest(scenario, prepared.context)],
            seconds: sliceSeconds,
            connections,
          });
          measured.push({ rps: measurement.rps, cpuUsPerRequest });
        }
        return measured;
      });
      curves[kind].push(curve);
      log(
        `${kind} life ${life + 1}/${lives}: ${curve.map((slice) => slice.cpuUsPerRequest.toFixed(0)).join(' ')} us/req`,
      );
    }
  }

  const rows = [`${scenario.name}: CPU us per response after start (median of ${lives} lives per server)`];
  rows.push('seconds   project  baseline  x CPU  project req/s  baseline req/s');
  for (let slice = 0; slice < slices; slice += 1) {
    const at = (kind: ServerKind, pick: (s: Slice) => number) =>
      curves[kind].map((curve) => pick(curve[slice] as Slice));
    const column = (kind: ServerKind, pick: (s: Slice) => number, width: number) =>
      median(at(kind, pick)).toFixed(0).padStart(width);
    const baselineCpu = at('baseline', cpuOf);
    const ratio = median(at('project', cpuOf).map((value, life) => value / (baselineCpu[life] ?? NaN)));
    const seconds = `${slice * sliceSeconds}-${(slice + 1) * sliceSeconds}`;
    rows.push(
      [
        seconds.padEnd(8),
        column('project', cpuOf, 8),
        column('baseline', cpuOf, 9),
        `${ratio.toFixed(2)}x`.padStart(6),
        column('project', rpsOf, 14),
        column('baseline', rpsOf, 15),
      ].join(' '),
    );
  }
  process.stdout.write(`${rows.join('\n')}\n`);
} finally {
  closeConnections();
  rmSync(dir, { recursive: true, force: true });
}
