//! Link prediction (not built yet: `tcgnn train --task link` says so).
