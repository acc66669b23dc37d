#!/usr/bin/env node
// The `petstore` command: manages accounts and API keys in the server's database.
import { main } from '../dist/src/cli.js';

process.exitCode = await main(process.argv.slice(2));
