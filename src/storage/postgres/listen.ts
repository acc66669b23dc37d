import pg from 'pg';

export interface ListenHandlers {
  /** A notification on the channel: a transaction that sent one committed. */
  notified(): void;
  /** LISTEN has taken, at first or on a new connection: from now on no notification is missed. */
  listening?(): void;
  /** The connection failed or ended: notifications are missed until `listening` is called again. */
  lost?(): void;
}

/** LISTENs on `channel` (its connection named `applicationName`), as `listen` does, with the storage's connection and error sink. */
export type Listen = (applicationName: string, channel: string, on: ListenHandlers) => { stop(): void };

/**
 * Where a LISTEN connection's failure is told: once when it is lost or cannot be made, not again
 * while it keeps failing, and again after it has listened once more.
 */
export type ListenFailed = (error: Error, channel: string) => void;

/** `listen` on the database `connectionString` names, its failures told to `failed`. */
export function listenerOn(connectionString: string, failed: ListenFailed = () => undefined): Listen {
  return (applicationName, channel, on) => listen(connectionString, applicationName, channel, on, failed);
}

/**
 * LISTENs on `channel` on a connection of its own (a pool's connections come and go), reconnected
 * a second after it is lost until `stop` is called.
 */
function listen(
  connectionString: string,
  applicationName: string,
  channel: string,
  on: ListenHandlers,
  failed: ListenFailed,
): { stop(): void } {
  let current: pg.Client | undefined;
  let told = false;
  const tell = (error: Error) => {
    if (told || current === undefined) return;
    told = true;
    failed(error, channel);
  };
  const connect = () => {
    const client = new pg.Client({ connectionString, application_name: applicationName });
    current = client;
    client.on('notification', () => on.notified());
    client.on('error', (error) => {
      if (current === client) tell(error);
    });
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
        if (current !== client) return;
        told = false;
        on.listening?.();
      })
      .catch((error: unknown) => {
        if (current === client) tell(error instanceof Error ? error : new Error(String(error)));
        return client.end().catch(() => undefined);
      });
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
