#!/usr/bin/env node
'use strict';
// The `cairn` command, run by the addon in this process: no separate binary in the package.
const path = require('node:path');
const native = require('../native.js');

// What `cairn claude-code install` and the like write into an agent's settings: this script
// (through the link npm made on PATH when there is one), not the node that runs it.
process.env.CAIRN_EXE = process.env.CAIRN_EXE || path.resolve(process.argv[1]);
process.exitCode = native.command(['cairn', ...process.argv.slice(2)]);
