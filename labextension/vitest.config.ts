import { defineConfig } from "vitest/config";

export default defineConfig({
  // test/bundle.test.ts reads the built bundle in ../torchlens_widgets/static/
  server: { fs: { allow: [".", "../torchlens_widgets/static", "../torchlens_widgets/render/theme.json", "../tests/fixtures/theme"] } },
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.ts"],
  },
});
