//! Graph classification (not built yet: `tcgnn train --task graph` says so).
