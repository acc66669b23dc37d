import { Agent, type IncomingHttpHeaders, request } from 'node:http';

export interface HttpRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

const keepAlive = new Agent({ keepAlive: true });

/** One request; `fresh` opens a new connection (for polling a server that is starting). */
export function send(
  origin: string,
  { method, path, headers, body }: HttpRequest,
  fresh = false,
): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      new URL(path, origin),
      { method, headers, agent: fresh ? false : keepAlive },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text }));
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

/** Closes idle kept-alive connections, so the process can exit. */
export function closeConnections(): void {
  keepAlive.destroy();
}
