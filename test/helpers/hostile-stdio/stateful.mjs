// A well-behaved server: a counter per process, exits at end of input.
import { serve } from './base.mjs';

serve();
