// node dist/scripts/haproxy-command.js 'set server instances/spare1 state ready' ...: each command
// to HAProxy's runtime API at PETSTORE_LB_ADMIN_SOCKET, in turn (deploy/run-local.sh's rolls). Exits
// 1 at the first HAProxy refuses, saying why.
import { REFUSED_COMMAND, runtimeCommand } from './haproxy.js';

const socket = process.env.PETSTORE_LB_ADMIN_SOCKET;
if (socket === undefined || socket === '') {
  process.stderr.write('haproxy-command: set PETSTORE_LB_ADMIN_SOCKET to the runtime API socket\n');
  process.exit(2);
}
for (const command of process.argv.slice(2)) {
  const answer = await runtimeCommand(socket, command);
  if (REFUSED_COMMAND.test(answer)) {
    process.stderr.write(`haproxy-command: HAProxy refused "${command}": ${answer}\n`);
    process.exit(1);
  }
}
