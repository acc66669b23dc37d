/**
 * A server process of `npm run dev`, started before it is needed: it loads the packages the server
 * imports (most of a start's time), then waits. Told to start, it runs dist/src/server.js as it is
 * on disk at that moment, exactly as `npm start` does.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { projectRoot } from '../../src/contract/paths.js';

const serverDir = join(projectRoot, 'dist', 'src');

/** The packages the compiled server imports (`from 'fastify'`, `import('openapi-sampler')`). */
function packagesImported(dir: string): Set<string> {
  const specifiers = new Set<string>();
  for (const file of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    if (!file.endsWith('.js')) continue;
    for (const [, specifier] of readFileSync(join(dir, file), 'utf8').matchAll(
      /(?:\bfrom\s*|\bimport\s*\(\s*)['"]([^'"./][^'"]*)['"]/g,
    )) {
      if (specifier !== undefined && !specifier.startsWith('node:')) specifiers.add(specifier);
    }
  }
  return specifiers;
}

// Loaded from this folder, a package resolves to the same file as from dist/src/: one module cache.
const loaded = Promise.all(
  [...packagesImported(serverDir)].map((specifier) => import(specifier).catch(() => undefined)),
);

// The loop that started this process is gone: stop as a server stops.
process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
process.once('message', (message) => {
  if (message !== 'start') return;
  void loaded.then(() => import(pathToFileURL(join(serverDir, 'server.js')).href));
});
