import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The shipped configuration: deploy/run-local.sh, the balancer tests and the bench run it (from dist/scripts). */
export const HAPROXY_CONFIG = fileURLToPath(new URL('../../deploy/haproxy.cfg', import.meta.url));

const INSTALL = 'apt-get install -y haproxy';

/** Debian installs haproxy in /usr/sbin, which a user's PATH may lack. */
export function haproxyBinary(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin'].filter((dir) => dir !== '');
  return dirs.map((dir) => join(dir, 'haproxy')).find((path) => existsSync(path));
}

export const HAPROXY_MISSING = `no haproxy on the PATH or in /usr/sbin (install it with: ${INSTALL})`;

export function requireHaproxy(): string {
  const binary = haproxyBinary();
  if (binary === undefined) throw new Error(HAPROXY_MISSING);
  return binary;
}
