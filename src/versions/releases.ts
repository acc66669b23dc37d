import { readdirSync } from 'node:fs';
import { join } from 'node:path';

export type Version = [major: number, minor: number, patch: number];

export interface Release {
  version: Version;
  /** Relative to the project root, e.g. `contracts/v1.0.0.yaml`. */
  file: string;
}

/** Where the released contracts are, relative to the project root. */
export const RELEASES_DIR = 'contracts';

export function parseVersion(text: string): Version | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)$/.exec(text);
  return match === null ? undefined : [Number(match[1]), Number(match[2]), Number(match[3])];
}

/** Every `contracts/vX.Y.Z.yaml`, oldest first. */
export function releases(root: string): Release[] {
  const found = readdirSync(join(root, RELEASES_DIR)).flatMap((name) => {
    const version = parseVersion(/^v(.+)\.yaml$/.exec(name)?.[1] ?? '');
    return version === undefined ? [] : [{ version, file: `${RELEASES_DIR}/${name}` }];
  });
  return found.sort(
    (a, b) => a.version[0] - b.version[0] || a.version[1] - b.version[1] || a.version[2] - b.version[2],
  );
}

/** The newest `contracts/vX.Y.Z.yaml` of this major version, if any was released. */
export function newestRelease(root: string, major: number): Release | undefined {
  return releases(root)
    .filter(({ version }) => version[0] === major)
    .at(-1);
}
