# Tether server image: Swift 6 on Debian 12 with the C libraries it links.
FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libpq-dev libssl-dev libmicrohttpd-dev libcurl4-openssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product tether

FROM swift:6.3-bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libpq5 libssl3 libmicrohttpd12 libcurl4 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /app tether
WORKDIR /app
COPY --from=build /src/.build/release/tether /app/tether
COPY schema /app/schema
ENV TETHER_SCHEMA_DIR=/app/schema \
    TETHER_LISTEN=0.0.0.0:8080
USER tether
EXPOSE 8080
ENTRYPOINT ["/app/tether"]
CMD ["serve"]
