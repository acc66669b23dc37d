/**
 * `npm run generate` (after openapi-typescript writes generated/): writes the TypeScript client's
 * generated/ from openapi.yaml (scripts/contract/generate-client.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { projectRoot } from '../src/contract/paths.js';
import { generateClient } from './contract/generate-client.js';

for (const [file, text] of await generateClient(projectRoot)) {
  mkdirSync(dirname(join(projectRoot, file)), { recursive: true });
  writeFileSync(join(projectRoot, file), text);
}
