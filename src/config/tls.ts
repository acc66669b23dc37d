import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** TLS_CERT_FILE and TLS_KEY_FILE, as the configuration resolves them. */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
}

/** A TLS file, or a start that stops saying which one could not be read. */
function readTlsFile(name: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new Error(`${name} ${path} cannot be read: ${(error as Error).message}; set ${name} to a readable file`, {
      cause: error,
    });
  }
}

function certificateIn(pem: Buffer): X509Certificate | undefined {
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

function privateKeyIn(pem: Buffer): KeyObject | undefined {
  try {
    return createPrivateKey(pem);
  } catch {
    return undefined;
  }
}

/**
 * The certificate and key (PEM) for HTTPS, checked here: a wrong file would otherwise stop the start
 * with OpenSSL's words (`PEM routines::no start line`), which name neither setting.
 */
export function readTls({ certFile, keyFile }: TlsFiles): { cert: Buffer; key: Buffer } {
  const cert = readTlsFile('TLS_CERT_FILE', certFile);
  const key = readTlsFile('TLS_KEY_FILE', keyFile);
  const certificate = certificateIn(cert);
  const privateKey = privateKeyIn(key);
  if (certificate === undefined && privateKey === undefined && certificateIn(key) && privateKeyIn(cert)) {
    throw new Error(
      `TLS_CERT_FILE ${certFile} holds a private key and TLS_KEY_FILE ${keyFile} a certificate: the two are swapped; exchange them`,
    );
  }
  if (certificate === undefined) {
    throw new Error(
      `TLS_CERT_FILE ${certFile} holds no PEM certificate; set it to the server's certificate (-----BEGIN CERTIFICATE-----)`,
    );
  }
  if (privateKey === undefined) {
    throw new Error(
      `TLS_KEY_FILE ${keyFile} holds no unencrypted PEM private key; set it to the key of the certificate in TLS_CERT_FILE (-----BEGIN PRIVATE KEY-----)`,
    );
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new Error(
      `TLS_KEY_FILE ${keyFile} is not the private key of the certificate in TLS_CERT_FILE ${certFile}; set the two to a certificate and its own key`,
    );
  }
  return { cert, key };
}
