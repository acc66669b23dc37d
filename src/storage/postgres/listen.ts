import pg from 'pg';

export interface ListenHandlers {
  /** A notification on the channel: a transaction that sent one committed. */
  notified(): void;
  /** LISTEN has taken, at first or on a new connection: from now on no notification is missed. */
  listening?(): void;
  /** The connection failed or ended: notifications are missed until `listening` is called again. */
  lost?(): void;
}

/**
 * LISTENs on `channel` on a connection of its own (a pool's connections come and go), reconnected
 * a second after it is lost until `stop` is called.
 */
export function listen(
  connectionString: string,
  applicationName: string,
  channel: string,
  on: ListenHandlers,
): { stop(): void } {
  let current: pg.Client | undefined;
  const connect = () => {
    const client = new pg.Client({ connectionString, application_name: applicationName });
    current = client;
    client.on('notification', () => on.notified());
    client.on('error', () => undefined);
    client.on('end', () => {
      if (current !== client) return;
      on.lost?.();
      setTimeout(() => {
        if (current === client) connect();
      }, 1000).unref();
    });
    client
      .connect()
      .then(() => client.query(`LISTEN ${channel}`))
      .then(() => {
        if (current === client) on.listening?.();
      })
      .catch(() => client.end().catch(() => undefined));
  };
  connect();
  return {
    stop() {
      const client = current;
      current = undefined;
      void client?.end().catch(() => undefined);
    },
  };
}
