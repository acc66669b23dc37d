/** `npm run changelog`: writes contracts/CHANGELOG.md from the released contracts. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../src/contract/paths.js';
import { renderChangelog } from './contract-check/changelog.js';
import { files } from './contract-check/drift.js';

writeFileSync(join(projectRoot, files.changelog), (await renderChangelog(projectRoot)).text);
console.log(`wrote ${files.changelog}`);
