/**
 * `@petstore/client/v1`: the client of version 1 of the API, generated from its last release
 * (`contracts/v1.2.0.yaml`, served under `/v1`), for the programs written against it. Moving to
 * version 2 is importing `@petstore/client` instead (docs/client.md, "Versions").
 */
export * from './generated/v1/index.js';
