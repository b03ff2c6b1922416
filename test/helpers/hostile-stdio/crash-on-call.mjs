// Answers initialize and tools/list, and exits with code 3 at any tools/call.
import { serve } from './base.mjs';

serve({ onCall: () => process.exit(3) });
