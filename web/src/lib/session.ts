import { createAuthStore } from './auth-store';
import { currentAddress, navigate } from './router';

/** The app's one auth store: every request of every page goes through `auth.request`. */
export const auth = createAuthStore({
  currentAddress,
  navigate: (address) => navigate(address, { replace: true }),
});
