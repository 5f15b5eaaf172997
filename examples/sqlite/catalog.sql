-- The catalogue examples/tools/find_products.yaml reads. Run by
-- `go run ./examples/sqlite FILE`, which writes a fresh SQLite file.
CREATE TABLE products (
  id          TEXT PRIMARY KEY,
  name        TEXT NOT NULL,
  price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
  in_stock    INTEGER NOT NULL CHECK (in_stock >= 0)
);
INSERT INTO products (id, name, price_cents, in_stock) VALUES
  ('prd_mug_blue',   'Blue enamel mug',           1450, 32),
  ('prd_mug_white',  'White porcelain mug',        990, 0),
  ('prd_teapot',     'Cast iron teapot',          5400, 4),
  ('prd_kettle',     'Stovetop kettle',           3900, 11),
  ('prd_tea_green',  'Sencha green tea, 100 g',    850, 120),
  ('prd_mug_travel', 'Insulated travel mug',      2200, 17);
