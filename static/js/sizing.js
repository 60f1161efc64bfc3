// The submit form's "From past runs": filled from each preview answer's `sizing`.
(function () {
  "use strict";
})();
