/**
 * Runs before each system test file. The daemons these tests run in their own process hash their
 * passwords at a lower scrypt cost: a run hashes a few hundred, each a twentieth of a second of CPU
 * at the real cost, to test what is around the hash (logins, users, sign-ins). The real cost is
 * held by src/auth/password.test.ts, and `svc serve` started as a process always uses it.
 */
import { setScryptCost } from '../src/auth/password.js';

setScryptCost(1024);
