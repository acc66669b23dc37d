/**
 * `node dist/scripts/bench/tracing.js [scenario...]` (default get-one and create): instructions.js's
 * count of each scenario with tracing on, every trace sampled and then 1% of them, exporting over
 * OTLP/HTTP to a sink on loopback that takes every export. With tracing off the count is
 * instructions.js's own. Each is counted against the baseline, which is not traced.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { projectRoot } from '../../src/contract/paths.js';

const SAMPLING = { 'every trace': '1', '1% of traces': '0.01' };
const scenarios = process.argv.slice(2);

let exports = 0;
const sink = createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    exports++;
    response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
const endpoint = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;

try {
  for (const scenario of scenarios.length > 0 ? scenarios : ['get-one', 'create']) {
    for (const [sampled, ratio] of Object.entries(SAMPLING)) {
      process.stdout.write(`${scenario}, tracing on, ${sampled} sampled:\n`);
      // Not spawnSync: the sink answers the server's exports while the count runs.
      const child = spawn(process.execPath, [join(projectRoot, 'dist/scripts/bench/instructions.js'), scenario], {
        env: {
          ...process.env,
          INSTRUCTIONS_AGAINST: 'baseline',
          OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
          OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
          OTEL_TRACES_SAMPLER_ARG: ratio,
          // Small batches, often: under valgrind one default batch (512 spans) holds the event loop past
          // the load's 10 s timeout. The work per span is the same.
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '64',
          OTEL_BSP_SCHEDULE_DELAY: '200',
        },
        stdio: 'inherit',
      });
      const [counted] = (await once(child, 'exit')) as [number | null];
      if (counted !== 0) throw new Error(`instructions.js ${scenario} failed`);
    }
  }
  process.stdout.write(`the sink took ${exports} exports\n`);
} finally {
  sink.close();
}
