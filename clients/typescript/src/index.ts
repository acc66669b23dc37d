/**
 * `@petstore/client`: the client of version 2 of the API (`openapi.yaml`, served under `/v2`).
 * Version 1 has its own, `@petstore/client/v1`, with the same names (docs/client.md, "Versions").
 */
export * from './generated/v2/index.js';
