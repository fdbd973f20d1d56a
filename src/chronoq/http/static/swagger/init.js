// Starts Swagger UI on the docs page. A file, not an inline script, so that the page's CSP can
// forbid inline scripts; the page names the OpenAPI document in a data attribute.
"use strict";

window.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapi,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    validatorUrl: null, // the default sends the document to validator.swagger.io
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
});
