import { createConnection } from 'node:net';
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

/**
 * One command to HAProxy's runtime API (`stats socket`, level admin) at `socket`, and its answer.
 * deploy/run-local.sh adds and removes servers this way, without a reload.
 */
export function runtimeCommand(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const connection = createConnection(socket, () => connection.end(`${command}\n`));
    connection.setEncoding('utf8');
    connection.on('data', (chunk: string) => (answer += chunk));
    connection.on('end', () => resolve(answer.trim()));
    connection.on('error', reject);
  });
}

/** Answers of the runtime API's `set server` that say it did nothing. */
export const REFUSED_COMMAND =
  /^(No such|Require|Unknown|Invalid|Can't|Cannot|'set server')|error|not (allowed|supported)/i;
